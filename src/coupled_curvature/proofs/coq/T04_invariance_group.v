(* T4, the exact invariance group of D, for every block size n, over any real closed field.
   For A invertible acting as in T1 (w -> A w, g -> A⁻ᵀ g, H -> A⁻ᵀ H A⁻¹):
     (i)   D unchanged for all w <> 0, g <> 0, symmetric H
     (ii)  ‖A w‖² ‖A⁻ᵀ g‖² = ‖w‖² ‖g‖² for all w, g
     (iii) Aᵀ A = c² I for some c > 0, i.e. A ∈ CO(n)
   are equivalent (T4_i_ii, T4_ii_iii, T4_i_iii).  The SPEC states T4 for n >= 2; the proofs here
   hold for every n (for n = 0, 1 all three are true of every invertible A).
   Witness (T4_witness, T4_witness_D): for A not in CO(n) there are standard basis vectors
   w = e_i, g = e_j and a factor 0 < f < 1 with D(after) = f · D(before) for every H.  The proof
   follows SPEC T4: with a_i = ‖A e_i‖² = M_ii and b_j = ‖A⁻ᵀ e_j‖² = (M⁻¹)_jj (M = AᵀA),
   Cauchy–Schwarz gives a_i b_i >= 1 with equality iff e_i is an eigenvector of M; if every
   a_i b_j <= 1 then every e_i is an eigenvector with eigenvalue a_i and all a_i are equal, so
   M is scalar.  Hence some pair (i, j) (i = j when e_i is not an eigenvector of M, otherwise
   M_ii > M_jj) has a_i b_j > 1, i.e. f = 1/(a_i b_j) < 1.
   The two cases separately, as SPEC T4 states them: T4_witness_not_eigen (e_i not an
   eigenvector of M: w = g = e_i, f = 1/(M_ii (M⁻¹)_ii)) and T4_witness_eigen (e_i, e_j
   eigenvectors with M_jj < M_ii: w = e_i, g = e_j, f = M_jj/M_ii).  Not formalised: "with
   eigenvectors of M the factor is exactly κ(A)⁻²" (it needs the real spectral theorem, which
   MathComp 1.15 lacks).
   The vector facts (bilinearity of dot, Cauchy–Schwarz, basis vectors) are in Common.v, the T1
   invariance of wᵀHw and wᵀg (quad_act, dot_act) in T01_transformation_law.v. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs Common T01_transformation_law.

Section ActionFacts.
Variable R : rcfType.
Variable n : nat.
Implicit Types (u v w g : 'cV[R]_n) (A B H : 'M[R]_n) (i j : 'I_n).
Local Notation e := (@e R n).

Lemma coupledDE w g H : coupledD w g H = quad H w / (sqnorm w * sqnorm g).
Proof. by rewrite /coupledD /RQ invfM mulrA. Qed.

Lemma coupledD_act A w g H : A \in unitmx ->
  coupledD (act_w A w) (act_g A g) (act_H A H)
  = quad H w / (sqnorm (act_w A w) * sqnorm (act_g A g)).
Proof. by move=> Au; rewrite coupledDE quad_act. Qed.

Lemma act_g_unit A : A \in unitmx -> (invmx A)^T \in unitmx.
Proof. by move=> Au; rewrite unitmx_tr unitmx_inv. Qed.

Lemma conformal_unit A : conformal A -> A \in unitmx.
Proof.
case=> c [c0 hA]; have := congr1 determinant hA.
rewrite det_mulmx det_tr det_scalar => hd.
rewrite unitmxE unitfE; apply/eqP => d0; move: hd; rewrite d0 mul0r => /esym/eqP.
by rewrite !expf_eq0 (negbTE (lt0r_neq0 c0)) !andbF.
Qed.

(* for A ∈ CO(n): A⁻¹ = c⁻² Aᵀ *)
Lemma conformal_inv A c : A \in unitmx -> c != 0 -> A^T *m A = (c ^+ 2)%:M ->
  invmx A = c ^- 2 *: A^T.
Proof.
move=> Au c0 hA.
by rewrite -[RHS](mulmxK Au) -scalemxAl hA scale_scalar_mx mulVf ?expf_neq0 // mul1mx.
Qed.

Lemma sqnorm_conf_w A c w : A^T *m A = (c ^+ 2)%:M -> sqnorm (act_w A w) = c ^+ 2 * sqnorm w.
Proof. by move=> hA; rewrite /sqnorm /act_w dot_mulmx mulmxA hA mul_scalar_mx dotZr. Qed.

Lemma sqnorm_conf_g A c g : A \in unitmx -> c != 0 -> A^T *m A = (c ^+ 2)%:M ->
  sqnorm (act_g A g) = c ^- 2 * sqnorm g.
Proof.
move=> Au c0 hA; rewrite /act_g (conformal_inv Au c0 hA) linearZ /= trmxK -scalemxAl.
by rewrite sqnormZ (sqnorm_conf_w g hA); field.
Qed.

Lemma invmx_gram A : A \in unitmx -> invmx (A^T *m A) = invmx A *m (invmx A)^T.
Proof.
move=> Au; have Mu : A^T *m A \in unitmx by rewrite unitmx_mul unitmx_tr Au.
have MY : A^T *m A *m (invmx A *m (invmx A)^T) = 1%:M.
  by rewrite -mulmxA (mulmxA A) mulmxV // mul1mx -trmx_mul mulVmx // trmx1.
by rewrite -[RHS](mulKmx Mu) MY mulmx1.
Qed.

(* ‖A e_i‖² = M_ii and ‖A⁻ᵀ e_i‖² = (M⁻¹)_ii for M = AᵀA *)
Lemma sqnorm_Ae A i : sqnorm (act_w A (e i)) = (A^T *m A) i i.
Proof. by rewrite /sqnorm /act_w dot_mulmx mulmxA dot_e_mxE. Qed.

Lemma sqnorm_iAe A i : A \in unitmx -> sqnorm (act_g A (e i)) = (invmx (A^T *m A)) i i.
Proof.
by move=> Au; rewrite invmx_gram // /sqnorm /act_g dot_mulmx trmxK mulmxA dot_e_mxE.
Qed.

(* Cauchy–Schwarz for the pair (A e_i, A⁻ᵀ e_i): M_ii (M⁻¹)_ii >= 1, with equality only when
   e_i is an eigenvector of M = AᵀA *)
Lemma cs_basis A i : A \in unitmx ->
  1 <= sqnorm (act_w A (e i)) * sqnorm (act_g A (e i)).
Proof.
move=> Au; have := cauchy_schwarz (act_w A (e i)) (act_g A (e i)).
by rewrite dot_act // -/(sqnorm (e i)) sqnorm_e expr1n.
Qed.

Lemma cs_basis_eq A i : A \in unitmx ->
  sqnorm (act_w A (e i)) * sqnorm (act_g A (e i)) = 1 ->
  A^T *m A *m e i = sqnorm (act_w A (e i)) *: e i.
Proof.
move=> Au ab1; set a := sqnorm (act_w A (e i)) in ab1 *.
have b_gt0 : 0 < sqnorm (act_g A (e i)).
  by apply: sqnorm_mul_gt0; [apply: act_g_unit | apply: e_neq0].
have v0 : act_g A (e i) != 0 by rewrite -sqnorm_eq0 lt0r_neq0.
have := cauchy_schwarz_eq (u := act_w A (e i)) v0.
rewrite dot_act // -/(sqnorm (e i)) sqnorm_e expr1n => /(_ ab1).
rewrite /act_w => hu; rewrite -mulmxA hu -scalemxAr /act_g mulmxA -trmx_mul.
rewrite mulVmx // trmx1 mul1mx; congr (_ *: _).
apply: (mulfI (lt0r_neq0 b_gt0)); rewrite mulrC div1r mulVf ?lt0r_neq0 //.
by rewrite mulrC ab1.
Qed.

End ActionFacts.

Section T4.
Variable R : rcfType.
Variable n : nat.
Implicit Types (w g : 'cV[R]_n) (A H : 'M[R]_n) (i j : 'I_n).
Local Notation e := (@e R n).

(* The contrapositive of the witness: if no pair of basis vectors (e_i, e_j) has
   ‖A e_i‖² ‖A⁻ᵀ e_j‖² > 1, then A ∈ CO(n). *)
Lemma no_witness_conformal A : A \in unitmx ->
  (forall i j : 'I_n, sqnorm (act_w A (e i)) * sqnorm (act_g A (e j)) <= 1) ->
  conformal A.
Proof.
move=> Au hle.
pose a i := sqnorm (act_w A (e i)); pose b j := sqnorm (act_g A (e j)).
have a_gt0 i : 0 < a i by apply: sqnorm_mul_gt0 => //; apply: e_neq0.
have b_gt0 j : 0 < b j by apply: sqnorm_mul_gt0; [apply: act_g_unit | apply: e_neq0].
have ab1 i : a i * b i = 1.
  apply/eqP; rewrite Order.POrderTheory.eq_le hle /=.
  have := cauchy_schwarz (act_w A (e i)) (act_g A (e i)).
  by rewrite dot_act // -/(sqnorm (e i)) sqnorm_e expr1n.
have eig i : A^T *m A *m e i = a i *: e i.
  have v0 : act_g A (e i) != 0 by rewrite -sqnorm_eq0 lt0r_neq0 ?b_gt0.
  have := cauchy_schwarz_eq (u := act_w A (e i)) v0; rewrite dot_act // -/(sqnorm (e i)) sqnorm_e expr1n.
  move=> /(_ (ab1 i)).
  rewrite /act_w => hu; rewrite -mulmxA hu -scalemxAr /act_g mulmxA -trmx_mul.
  rewrite mulVmx // trmx1 mul1mx; congr (_ *: _).
  apply: (mulfI (lt0r_neq0 (b_gt0 i))); rewrite mulrC -/(b i) div1r mulVf ?lt0r_neq0 //.
  by rewrite mulrC ab1.
have a_eq i j : a i = a j.
  apply/eqP; rewrite Order.POrderTheory.eq_le; apply/andP; split.
    by rewrite -(ler_pmul2r (b_gt0 j)) ab1 hle.
  by rewrite -(ler_pmul2r (b_gt0 i)) ab1 hle.
have [n0 | n_gt0] := posnP n.
  exists 1; split; first exact: ltr01.
  by apply/matrixP => i; have := ltn_ord i; rewrite [X in (_ < X)%N]n0.
exists (Num.sqrt (a (Ordinal n_gt0))); split; first by rewrite sqrtr_gt0.
rewrite sqr_sqrtr; last exact: Order.POrderTheory.ltW.
apply/matrixP => i j.
have := congr1 (fun M : 'cV_n => M i 0) (eig j).
rewrite /e -colE !mxE eqxx andbT (a_eq j (Ordinal n_gt0)) => ->.
by case: (i == j); rewrite ?mulr1 ?mulr0 ?mulr1n ?mulr0n.
Qed.

(* T4 (ii) ⇔ (iii) *)
Theorem T4_ii_iii A : A \in unitmx ->
  (forall w g, sqnorm (act_w A w) * sqnorm (act_g A g) = sqnorm w * sqnorm g)
  <-> conformal A.
Proof.
move=> Au; split.
  by move=> h; apply: no_witness_conformal => // i j; rewrite h !sqnorm_e mulr1.
case=> c [c0 hA] w g; have c0' := lt0r_neq0 c0.
by rewrite (sqnorm_conf_w w hA) (sqnorm_conf_g g Au c0' hA); field.
Qed.

(* T4 (i) ⇔ (ii) *)
Theorem T4_i_ii A : A \in unitmx ->
  invariant_under (@coupledD _ _) A
  <-> (forall w g, sqnorm (act_w A w) * sqnorm (act_g A g) = sqnorm w * sqnorm g).
Proof.
move=> Au; split=> h; last by move=> w g H _ _ _; rewrite coupledD_act // h -coupledDE.
move=> w g; have [->|w0] := eqVneq w 0; first by rewrite /act_w mulmx0 !sqnorm0 !mul0r.
have [->|g0] := eqVneq g 0; first by rewrite /act_g mulmx0 !sqnorm0 !mulr0.
have := h w g 1%:M w0 g0 (trmx1 _ _); rewrite coupledD_act // coupledDE quad1.
by move/(mulfI (lt0r_neq0 (sqnorm_gt0 w0)))/invr_inj.
Qed.

(* T4 (i) ⇔ (iii) *)
Theorem T4_i_iii A : A \in unitmx -> invariant_under (@coupledD _ _) A <-> conformal A.
Proof. by move=> Au; rewrite T4_i_ii // T4_ii_iii. Qed.

(* T4 witness: for A ∉ CO(n), basis vectors e_i, e_j and a factor 0 < f < 1 with
   D(after) = f · D(before) for every H. *)
Theorem T4_witness A : A \in unitmx -> ~ conformal A ->
  exists (i j : 'I_n) (f : R), 0 < f < 1 /\
    forall H, coupledD (act_w A (e i)) (act_g A (e j)) (act_H A H) = f * coupledD (e i) (e j) H.
Proof.
move=> Au nc.
have [/existsP[i /existsP[j hij]] | hno] :=
  boolP [exists i, [exists j, 1 < sqnorm (act_w A (e i)) * sqnorm (act_g A (e j))]].
  have p0 : 0 < sqnorm (act_w A (e i)) * sqnorm (act_g A (e j)).
    by rewrite mulr_gt0 // sqnorm_mul_gt0 ?act_g_unit ?e_neq0.
  exists i, j, (sqnorm (act_w A (e i)) * sqnorm (act_g A (e j)))^-1; split.
    by rewrite invr_gt0 p0 /= invf_lt1.
  by move=> H; rewrite coupledD_act // coupledDE !sqnorm_e mulr1 divr1 mulrC.
case: nc; apply: no_witness_conformal => // i j; rewrite real_leNgt ?num_real //.
by apply: contra hno => hij; apply/existsP; exists i; apply/existsP; exists j.
Qed.

Lemma coupledD_e1 (i j : 'I_n) : coupledD (e i) (e j) 1%:M = 1 :> R.
Proof. by rewrite coupledDE quad1 !sqnorm_e mulr1 divr1. Qed.

(* the witness as a strict decrease of D itself, with H = I *)
Theorem T4_witness_D A : A \in unitmx -> ~ conformal A ->
  exists i j : 'I_n,
    coupledD (act_w A (e i)) (act_g A (e j)) (act_H A 1%:M) < coupledD (e i) (e j) 1%:M.
Proof.
move=> Au nc; have [i [j [f [/andP[_ f1] hD]]]] := T4_witness Au nc.
by exists i, j; rewrite hD coupledD_e1 mulr1.
Qed.

(* The witness of SPEC T4, case by case.  M = AᵀA.
   Case 1: e_i is not an eigenvector of M; then w = g = e_i gives the factor 1/(M_ii (M⁻¹)_ii) < 1. *)
Theorem T4_witness_not_eigen A (i : 'I_n) : A \in unitmx ->
  ~ (exists t, A^T *m A *m e i = t *: e i) ->
  let f := ((A^T *m A) i i * (invmx (A^T *m A)) i i)^-1 in
  0 < f < 1 /\
  forall H, coupledD (act_w A (e i)) (act_g A (e i)) (act_H A H) = f * coupledD (e i) (e i) H.
Proof.
move=> Au neig f; rewrite /f -sqnorm_Ae -sqnorm_iAe //.
have p1 : 1 < sqnorm (act_w A (e i)) * sqnorm (act_g A (e i)).
  rewrite Order.POrderTheory.lt_neqAle cs_basis // andbT eq_sym.
  by apply/eqP => /(cs_basis_eq Au) h; apply: neig; exists (sqnorm (act_w A (e i))).
have p0 : 0 < sqnorm (act_w A (e i)) * sqnorm (act_g A (e i)).
  exact: Order.POrderTheory.lt_trans ltr01 p1.
split; first by rewrite invr_gt0 p0 /= invf_lt1.
by move=> H; rewrite coupledD_act // coupledDE !sqnorm_e mulr1 divr1 [RHS]mulrC.
Qed.

(* Case 2: e_i and e_j are eigenvectors of M with M_jj < M_ii; then w = e_i, g = e_j gives the
   factor M_jj / M_ii < 1. *)
Theorem T4_witness_eigen A (i j : 'I_n) (mi mj : R) : A \in unitmx ->
  A^T *m A *m e i = mi *: e i -> A^T *m A *m e j = mj *: e j -> mj < mi ->
  let f := mj / mi in
  0 < f < 1 /\
  forall H, coupledD (act_w A (e i)) (act_g A (e j)) (act_H A H) = f * coupledD (e i) (e j) H.
Proof.
move=> Au hi hj lt f.
have ai : sqnorm (act_w A (e i)) = mi.
  by rewrite sqnorm_Ae -dot_e_mxE hi dotZr -/(sqnorm (e i)) sqnorm_e mulr1.
have aj : sqnorm (act_w A (e j)) = mj.
  by rewrite sqnorm_Ae -dot_e_mxE hj dotZr -/(sqnorm (e j)) sqnorm_e mulr1.
have mj0 : 0 < mj by rewrite -aj sqnorm_mul_gt0 ?e_neq0.
have mi0 : 0 < mi := Order.POrderTheory.lt_trans mj0 lt.
have hg : act_g A (e j) = mj^-1 *: act_w A (e j).
  apply: (scalerI (lt0r_neq0 mj0)); rewrite scalerA mulfV ?lt0r_neq0 // scale1r.
  by rewrite /act_w /act_g scalemxAr -hj !mulmxA -trmx_mul mulmxV // trmx1 mul1mx.
have bj : sqnorm (act_g A (e j)) = mj^-1.
  rewrite hg sqnormZ aj; apply: (mulIf (lt0r_neq0 mj0)).
  by rewrite expr2 -!mulrA mulKf // lt0r_neq0.
split; first by rewrite divr_gt0 //= ltr_pdivr_mulr // mul1r.
move=> H; rewrite coupledD_act // coupledDE !sqnorm_e mulr1 divr1 ai bj /f.
by rewrite invfM invrK mulrC [mi^-1 * mj]mulrC.
Qed.

End T4.

(* Non-vacuity: a conformal A other than the identity (2 I, for every n > 0), and a concrete
   invertible non-conformal A = diag(2, 1), for which the witness theorems apply. *)
Section NonVacuity.
Variable R : rcfType.

Lemma conformal_2I n : conformal (2%:M : 'M[R]_n) /\ (2%:M : 'M[R]_n) \in unitmx.
Proof.
split; last by rewrite unitmxE det_scalar unitfE expf_neq0 // pnatr_eq0.
exists 2; split; first by rewrite ltr0n.
by rewrite tr_scalar_mx -scalar_mxM expr2.
Qed.

Lemma conformal_2I_neq1 n : (2%:M : 'M[R]_n.+1) != 1%:M.
Proof.
apply/negP => /eqP/(congr1 (fun M : 'M[R]_n.+1 => M 0 0)); rewrite !mxE eqxx /=.
by move/eqP; rewrite eqr_nat.
Qed.

Definition A21 : 'M[R]_2 := diag_mx (\row_(i < 2) (if i == 0 then 2 else 1)).

Lemma A21_unit : A21 \in unitmx.
Proof.
by rewrite unitmxE det_diag big_ord_recl big_ord1 !mxE /= unitfE mulr1 pnatr_eq0.
Qed.

Lemma A21_not_conformal : ~ conformal A21.
Proof.
case=> c [_ hA].
have h0 := congr1 (fun M : 'M[R]_2 => M 0 0) hA.
have h1 := congr1 (fun M : 'M[R]_2 => M 1 1) hA.
move: h0 h1; rewrite /A21 tr_diag_mx mulmx_diag !mxE /= => <-.
by move/eqP; rewrite mulr1 -natrM eqr_nat.
Qed.

Lemma T4_witness_nonvacuous :
  exists A : 'M[R]_2, A \in unitmx /\ ~ conformal A.
Proof. by exists A21; split; [exact: A21_unit | exact: A21_not_conformal]. Qed.

Lemma T4_nonvacuous :
  exists A : 'M[R]_2, A \in unitmx /\ conformal A /\ A != 1%:M.
Proof.
exists 2%:M; have [h1 h2] := conformal_2I 2.
by split=> //; split=> //; apply: conformal_2I_neq1.
Qed.

(* Non-vacuity of the two witness cases: for diag(2, 1), e_0 and e_1 are eigenvectors of AᵀA with
   eigenvalues 4 > 1 (case 2); for the shear I + E₀₁, e_0 is not an eigenvector of AᵀA (case 1). *)
Lemma diag_mx_e (d : 'rV[R]_2) (i : 'I_2) : diag_mx d *m e i = d 0 i *: e i.
Proof.
apply/matrixP => k l; rewrite (ord1 l) /e -colE !mxE eqxx andbT.
by case: (k =P i) => [->|_]; rewrite ?eqxx ?mulr1n ?mulr1 ?mulr0n ?mulr0.
Qed.

Lemma T4_witness_eigen_nonvacuous :
  A21 \in unitmx /\
  A21^T *m A21 *m e 0 = 4 *: e 0 /\ A21^T *m A21 *m e 1 = 1 *: e 1 /\ (1 : R) < 4.
Proof.
split; first exact: A21_unit.
rewrite /A21 tr_diag_mx mulmx_diag !diag_mx_e !mxE /= mulr1 -natrM.
by split=> //; split=> //; rewrite ltr1n.
Qed.

Definition Ashear2 : 'M[R]_2 := 1%:M + delta_mx 0 1.

Lemma Ashear2_unit : Ashear2 \in unitmx.
Proof.
have h : Ashear2 *m (1%:M - delta_mx 0 1) = 1%:M.
  by rewrite /Ashear2 mulmxDl !mulmxBr !mul1mx mulmx1 mul_delta_mx_0 // subr0 subrK.
by case: (mulmx1_unit h).
Qed.

Lemma T4_witness_not_eigen_nonvacuous :
  Ashear2 \in unitmx /\ ~ (exists t, Ashear2^T *m Ashear2 *m e 0 = t *: e 0).
Proof.
split; first exact: Ashear2_unit.
case=> t /(congr1 (fun v : 'cV[R]_2 => v 1 0)); rewrite /e -colE !mxE /=.
rewrite big_ord_recl big_ord1 !mxE /= mulr0 => /eqP.
by rewrite ?(mul0r, mulr0, mul1r, mulr1, add0r, addr0) oner_eq0.
Qed.

End NonVacuity.
