(* T7, the pseudo-inverse variant D⁺ = (wᵀH⁺w / wᵀw) · ‖g‖², for every block size n.
   - `penrose H X`: the four Penrose equations; `pinv_unique`: at most one solution.
   - `pinv H` is CONSTRUCTED (no existence hypothesis) from MathComp's full-rank factorisation
     H = F G (F = col_base H, n×r; G = row_base H, r×n; r = rank H): FᵀF and GGᵀ are invertible
     over an ordered field because xᵀKKᵀx = ‖Kᵀx‖², and H⁺ = Gᵀ(GGᵀ)⁻¹(FᵀF)⁻¹Fᵀ
     (`pinv_penrose`).
   - `T7_pinv_congruence`: (A⁻ᵀHA⁻¹)⁺ = A H⁺ Aᵀ for A ∈ CO(n);
     `T7_Dplus_invariant`: D⁺ is invariant under CO(n) (every w, g, H);
     `T7_converse`: invariance of D⁺ for all w <> 0, g <> 0 and symmetric H forces A ∈ CO(n);
     `T7_iff` the equivalence.
   - `T7_witness_*`: an exact witness: H = e₀e₀ᵀ (singular) and the shear A = I + E₀₁ (not
     conformal): (A⁻ᵀHA⁻¹)⁺ <> A H⁺ Aᵀ, wᵀH⁺w goes from 1 to 1/4 for w = e₀ while wᵀHw is kept
     (T1), gᵀH⁺g goes from 0 to 1/4 for g = e₁, and D⁺(e₀, e₀, H) goes from 1 to 1/2.
   The relative-cutoff pseudo-inverse H⁺_τ (spectral, τ = rtol·max|λ|), the form diagnose computes, is
   in T07_relative_cutoff.v, for a block Hessian given with an orthogonal eigendecomposition. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs Common T01_transformation_law T04_invariance_group.

Section Gram.
Variable R : rcfType.

(* a row-free K (full row rank) has an invertible Gram matrix K Kᵀ *)
Lemma gram_unit p q (K : 'M[R]_(p, q)) : row_free K -> K *m K^T \in unitmx.
Proof.
move=> fK; rewrite -row_free_unit; apply: inj_row_free => v hv.
have hv' : (K *m K^T) *m v^T = 0.
  by rewrite -[K *m K^T]trmxK trmx_mul trmxK -trmx_mul hv trmx0.
have : sqnorm (K^T *m v^T) == 0.
  by rewrite /sqnorm /dot trmx_mul !trmxK -mulmxA (mulmxA K) hv' mulmx0 [X in X == _]mxE.
rewrite sqnorm_eq0 -trmx_mul -(trmx0 R) => /eqP/trmx_inj/eqP.
by rewrite -(mul0mx _ K) => /eqP/(row_free_inj fK).
Qed.

End Gram.

Section PseudoInverse.
Variable R : rcfType.
Variable n : nat.
Implicit Types (w g v : 'cV[R]_n) (A B H X Y : 'M[R]_n).

(* the four Penrose equations *)
Definition penrose H X : Prop :=
  [/\ H *m X *m H = H, X *m H *m X = X, (H *m X)^T = H *m X & (X *m H)^T = X *m H].

Theorem pinv_unique H X Y : penrose H X -> penrose H Y -> X = Y.
Proof.
case=> hX1 hX2 hX3 hX4 [hY1 hY2 hY3 hY4].
have HT : H^T = H^T *m Y^T *m H^T by rewrite -{1}hY1 !trmx_mul mulmxA.
have HTX : H^T = H^T *m X^T *m H^T by rewrite -{1}hX1 !trmx_mul mulmxA.
have eX : X = X *m H *m Y.
  rewrite -{1}hX2 -mulmxA -hX3 trmx_mul mulmxA HT !mulmxA -(mulmxA X X^T) -trmx_mul hX3.
  by rewrite -(mulmxA _ Y^T) -trmx_mul hY3 !mulmxA hX2.
have eY : Y = X *m H *m Y.
  rewrite -{1}hY2 -hY4 trmx_mul HTX -trmx_mul hX4 -(mulmxA _ H^T Y^T) -trmx_mul hY4.
  by rewrite -(mulmxA (X *m H)) hY2.
by rewrite eX -eY.
Qed.

(* the Penrose equations for a full-rank factorisation F G *)
Lemma penrose_factor r (F : 'M[R]_(n, r)) (G : 'M[R]_(r, n)) :
  F^T *m F \in unitmx -> G *m G^T \in unitmx ->
  penrose (F *m G) (G^T *m invmx (G *m G^T) *m invmx (F^T *m F) *m F^T).
Proof.
move=> uF uG.
set P := invmx (G *m G^T); set Q := invmx (F^T *m F).
have GP : G *m G^T *m P = 1%:M by apply: mulmxV.
have PG : P *m (G *m G^T) = 1%:M by apply: mulVmx.
have QF : Q *m (F^T *m F) = 1%:M by apply: mulVmx.
have Psym : P^T = P by rewrite /P trmx_inv trmx_mul trmxK.
have Qsym : Q^T = Q by rewrite /Q trmx_inv trmx_mul trmxK.
have HX : F *m G *m (G^T *m P *m Q *m F^T) = F *m Q *m F^T.
  by rewrite !mulmxA -(mulmxA F G) -(mulmxA F) GP mulmx1.
have XH : G^T *m P *m Q *m F^T *m (F *m G) = G^T *m P *m G.
  by rewrite !mulmxA -(mulmxA _ F^T F) -(mulmxA _ Q) QF mulmx1.
split.
- by rewrite HX !mulmxA -(mulmxA _ F^T F) -(mulmxA F Q) QF mulmx1.
- by rewrite XH !mulmxA -(mulmxA _ G G^T) -(mulmxA (G^T *m P) (G *m G^T) P) GP mulmx1.
- by rewrite HX !trmx_mul trmxK Qsym mulmxA.
- by rewrite XH !trmx_mul trmxK Psym mulmxA.
Qed.

Theorem pinv_penrose H : penrose H (pinv H).
Proof.
have uG : row_base H *m (row_base H)^T \in unitmx by apply: gram_unit; apply: row_base_free.
have uF : (col_base H)^T *m col_base H \in unitmx.
  rewrite -{2}[col_base H]trmxK; apply: gram_unit.
  by rewrite /row_free mxrank_tr; apply: col_base_full.
by have := penrose_factor uF uG; rewrite mulmx_base.
Qed.

Lemma pinv_eq H X : penrose H X -> pinv H = X.
Proof. exact: pinv_unique (pinv_penrose H). Qed.

Lemma pinv_unit H : H \in unitmx -> pinv H = invmx H.
Proof.
move=> Hu; apply: pinv_eq; split.
- by rewrite mulmxV // mul1mx.
- by rewrite mulVmx // mul1mx.
- by rewrite mulmxV // trmx1.
- by rewrite mulVmx // trmx1.
Qed.

(* helpers for scalar bookkeeping in matrix products *)
Lemma sAl a (M N : 'M[R]_n) : (a *: M) *m N = a *: (M *m N).
Proof. by rewrite scalemxAl. Qed.
Lemma sAr a (M N : 'M[R]_n) : M *m (a *: N) = a *: (M *m N).
Proof. by rewrite scalemxAr. Qed.
Lemma trmx_conj (M N : 'M[R]_n) : (N *m M *m N^T)^T = N *m M^T *m N^T.
Proof. by rewrite !trmx_mul trmxK mulmxA. Qed.
Lemma scale_id a (M : 'M[R]_n) : a = 1 -> a *: M = M.
Proof. by move->; rewrite scale1r. Qed.

(* congruence by a scaled isometry: if BᵀB = s I then (B H Bᵀ)⁺ = s⁻² B H⁺ Bᵀ *)
Lemma penrose_congr H X B s : penrose H X -> B^T *m B = s%:M -> s != 0 ->
  penrose (B *m H *m B^T) (s ^- 2 *: (B *m X *m B^T)).
Proof.
case=> hX1 hX2 hX3 hX4 hB s0.
have BTB M : M *m B^T *m B = s *: M by rewrite -mulmxA hB mul_mx_scalar.
have hX1' M : M *m H *m X *m H = M *m H by rewrite -[in RHS]hX1 !mulmxA.
have hX2' M : M *m X *m H *m X = M *m X by rewrite -[in RHS]hX2 !mulmxA.
split.
- rewrite ?(mulmxA, BTB, sAl, sAr, scalerA) hX1'; apply: scale_id; field; exact: s0.
- rewrite ?(mulmxA, BTB, sAl, sAr, scalerA) hX2'; congr (_ *: _); field; exact: s0.
- rewrite ?(mulmxA, BTB, sAl, sAr, scalerA) linearZ /= -(mulmxA B H X) trmx_conj hX3.
  by [].
- rewrite ?(mulmxA, BTB, sAl, sAr, scalerA) linearZ /= -(mulmxA B X H) trmx_conj hX4.
  by [].
Qed.

End PseudoInverse.

Section T7.
Variable R : rcfType.
Variable n : nat.
Implicit Types (w g v : 'cV[R]_n) (A B H X : 'M[R]_n).

Lemma conformal_n0 A : n = 0%N -> conformal A.
Proof.
move=> n0; exists 1; split; first exact: ltr01.
by apply/matrixP => i; have := ltn_ord i; rewrite [X in (_ < X)%N]n0.
Qed.

(* polarization: a map scaling every squared norm by k has BᵀB = k I *)
Lemma isometry_gram B k : (forall g, sqnorm (B *m g) = k * sqnorm g) -> B^T *m B = k%:M.
Proof.
move=> h; apply/matrixP => i j.
rewrite -dot_e_mxE -mulmxA -dot_mulmx mxE.
have := h (e i + e j); rewrite mulmxDr /sqnorm !dotDl !dotDr -!/(sqnorm _) !h.
rewrite (dotC (B *m e j)) !dot_e !sqnorm_e (eq_sym j i).
set x := dot _ _; set b := (i == j)%:R => hyp.
have e2 : 2 * (x - k * b) = - (k * (1 + b + (b + 1)) - (k * 1 + x + (x + k * 1))) by ring.
rewrite hyp subrr oppr0 in e2; move/eqP: e2; rewrite mulf_eq0 pnatr_eq0 subr_eq0 /= => /eqP->.
by rewrite /b mulr_natr.
Qed.

Lemma quad_conf A c X w : A^T *m A = (c ^+ 2)%:M ->
  quad (A *m X *m A^T) (A *m w) = c ^+ 4 * quad X w.
Proof.
move=> hA; rewrite /quad dot_mulmx -!mulmxA (mulmxA A^T A w) hA mul_scalar_mx.
rewrite mulmxA hA mul_scalar_mx -scalemxAr.
by rewrite !dotZr mulrA -exprD.
Qed.

(* T7: (A⁻ᵀ H A⁻¹)⁺ = A H⁺ Aᵀ for A ∈ CO(n) *)
Theorem T7_pinv_congruence A H : conformal A -> pinv (act_H A H) = A *m pinv H *m A^T.
Proof.
move=> cA; have Au := conformal_unit cA; case: cA => c [c0 hA].
have c0' := lt0r_neq0 c0.
set B := c ^- 2 *: A.
have hact : act_H A H = B *m H *m B^T.
  by rewrite /act_H (conformal_inv Au c0' hA) /B !linearZ /= trmxK.
have hBB : B^T *m B = (c ^- 2)%:M.
  rewrite /B [(_ *: A)^T]linearZ /= sAl sAr scalerA hA scale_scalar_mx; congr (_%:M); field.
  exact: c0'.
have s0 : c ^- 2 != 0 by rewrite invr_eq0 expf_neq0.
rewrite hact (pinv_eq (penrose_congr (pinv_penrose H) hBB s0)).
rewrite /B [(_ *: A)^T]linearZ /= ?(sAl, sAr, scalerA); apply: scale_id; field; exact: c0'.
Qed.

(* T7: D⁺ is invariant under CO(n), for every w, g, H *)
Theorem T7_Dplus_invariant A w g H : conformal A ->
  coupledDplus (act_w A w) (act_g A g) (act_H A H) = coupledDplus w g H.
Proof.
move=> cA; have Au := conformal_unit cA; rewrite /coupledDplus T7_pinv_congruence //.
case: cA => c [c0 hA]; have c0' := lt0r_neq0 c0.
rewrite (quad_conf _ _ hA) (sqnorm_conf_w w hA) (sqnorm_conf_g g Au c0' hA) invfM.
set q := quad _ w; set t := (sqnorm w)^-1; field; exact: c0'.
Qed.

(* T7 converse: invariance of D⁺ for all w <> 0, g <> 0 and symmetric H forces A ∈ CO(n) *)
Theorem T7_converse A : A \in unitmx -> invariant_under (@coupledDplus _ _) A -> conformal A.
Proof.
move=> Au h; set M := A^T *m A.
have Mu : M \in unitmx by rewrite unitmx_mul unitmx_tr Au.
have Msym : M^T = M by rewrite /M trmx_mul trmxK.
have hM : act_H A M = 1%:M.
  by rewrite /act_H /M mulmxA -trmx_mul mulmxV // trmx1 mul1mx mulmxV.
have MY : M *m (invmx A *m (invmx A)^T) = 1%:M.
  by rewrite /M -mulmxA (mulmxA A) mulmxV // mul1mx -trmx_mul mulVmx // trmx1.
have iM : invmx M = invmx A *m (invmx A)^T by rewrite -[RHS](mulKmx Mu) MY mulmx1.
have qM w : quad (invmx M) w = sqnorm (act_g A w).
  by rewrite /sqnorm /act_g dot_mulmx trmxK /quad iM mulmxA.
have key w g : w != 0 -> sqnorm (act_g A g) * sqnorm w = sqnorm (act_g A w) * sqnorm g.
  move=> w0; have [->|g0] := eqVneq g 0; first by rewrite /act_g mulmx0 !sqnorm0 !mul0r mulr0.
  have := h w g M w0 g0 Msym; rewrite /coupledDplus hM pinv_unit ?unitmx1 // invmx1 quad1.
  rewrite divff ?mul1r; last by rewrite lt0r_neq0 // sqnorm_mul_gt0.
  rewrite pinv_unit // qM => ->; rewrite mulrAC divfK //.
  by rewrite lt0r_neq0 // sqnorm_gt0.
have [n0|n_gt0] := posnP n; first exact: conformal_n0.
set i0 : 'I_n := Ordinal n_gt0; set k := sqnorm (act_g A (e i0)).
have k0 : 0 < k by rewrite sqnorm_mul_gt0 ?act_g_unit ?e_neq0.
have hk : (invmx A)^T^T *m (invmx A)^T = k%:M.
  apply: isometry_gram => g; have := key (e i0) g (@e_neq0 _ _ i0).
  by rewrite sqnorm_e mulr1 -/k.
rewrite trmxK in hk.
have hMk : M = k^-1%:M.
  apply: (scalerI (lt0r_neq0 k0)); rewrite scale_scalar_mx mulfV ?lt0r_neq0 //.
  by rewrite -mul_mx_scalar -hk MY.
exists (Num.sqrt k^-1); split; first by rewrite sqrtr_gt0 invr_gt0.
by rewrite sqr_sqrtr ?invr_ge0 ?Order.POrderTheory.ltW.
Qed.

Theorem T7_iff A : A \in unitmx -> invariant_under (@coupledDplus _ _) A <-> conformal A.
Proof.
move=> Au; split; first exact: T7_converse.
by move=> cA w g H _ _ _; apply: T7_Dplus_invariant.
Qed.

(* rank-one blocks H = v vᵀ: used by the witness *)
Lemma vTv v : v^T *m v = (sqnorm v)%:M.
Proof. exact: mx11_scalar. Qed.

Lemma vvT_sym v : (v *m v^T)^T = v *m v^T.
Proof. by rewrite trmx_mul trmxK. Qed.

Lemma pinv_rank1 v : v != 0 -> pinv (v *m v^T) = (sqnorm v) ^- 2 *: (v *m v^T).
Proof.
move=> v0; have s0 : sqnorm v != 0 by rewrite sqnorm_eq0.
have PP : v *m v^T *m (v *m v^T) = sqnorm v *: (v *m v^T).
  by rewrite mulmxA -(mulmxA v v^T v) vTv mul_mx_scalar -scalemxAl.
apply: pinv_eq; split.
- rewrite ?(sAl, sAr, PP, scalerA); apply: scale_id; field; exact: s0.
- rewrite ?(sAl, sAr, PP, scalerA); congr (_ *: _); field; exact: s0.
- by rewrite ?(sAl, sAr, PP, scalerA) linearZ /= vvT_sym.
- by rewrite ?(sAl, sAr, PP, scalerA) linearZ /= vvT_sym.
Qed.

Lemma act_H_rank1 A v : act_H A (v *m v^T) = act_g A v *m (act_g A v)^T.
Proof. by rewrite /act_H /act_g trmx_mul trmxK !mulmxA. Qed.

End T7.

(* The exact witness of T7: a singular H and a non-conformal A for which pseudo-inversion does not
   commute with the congruence and wᵀH⁺w, gᵀH⁺g and D⁺ change. *)
Section T7Witness.
Variable R : rcfType.

(* the shear A = I + E₀₁ = [[1, 1], [0, 1]] and H = e₀e₀ᵀ = [[1, 0], [0, 0]] *)
Definition Ashear : 'M[R]_2 := 1%:M + delta_mx 0 1.
Definition Hsing : 'M[R]_2 := e (0 : 'I_2) *m (e (0 : 'I_2))^T.

Lemma N2 : (delta_mx 0 1 : 'M[R]_2) *m delta_mx 0 1 = 0 :> 'M[R]_2.
Proof. by rewrite mul_delta_mx_0. Qed.

Lemma Ashear_inv : Ashear *m (1%:M - delta_mx 0 1) = 1%:M.
Proof. by rewrite /Ashear mulmxDl !mulmxBr !mul1mx mulmx1 N2 subr0 subrK. Qed.

Lemma Ashear_unit : Ashear \in unitmx.
Proof. by case: (mulmx1_unit Ashear_inv). Qed.

Lemma invmx_Ashear : invmx Ashear = 1%:M - delta_mx 0 1.
Proof. by rewrite -[RHS](mulKmx Ashear_unit) Ashear_inv mulmx1. Qed.

Lemma Ashear_e0 : act_w Ashear (e 0) = e 0.
Proof. by rewrite /act_w /Ashear /e mulmxDl mul1mx mul_delta_mx_0 ?addr0. Qed.

Lemma Ashear_g0 : act_g Ashear (e 0) = e 0 - e 1.
Proof.
by rewrite /act_g invmx_Ashear linearB /= trmx1 trmx_delta mulmxBl mul1mx /e mul_delta_mx.
Qed.

Lemma Ashear_g1 : act_g Ashear (e 1) = e 1.
Proof.
rewrite /act_g invmx_Ashear linearB /= trmx1 trmx_delta mulmxBl mul1mx /e.
by rewrite mul_delta_mx_0 ?subr0.
Qed.

Lemma sqnorm_g0 : sqnorm (act_g Ashear (e 0)) = 2.
Proof. by rewrite Ashear_g0 /sqnorm dotBl !dotBr !dot_e /=; ring. Qed.

Lemma pinv_Hsing : pinv Hsing = Hsing.
Proof. by rewrite /Hsing pinv_rank1 ?e_neq0 // sqnorm_e expr1n invr1 scale1r. Qed.

Lemma pinv_act_Hsing : pinv (act_H Ashear Hsing)
  = 4^-1 *: (act_g Ashear (e 0) *m (act_g Ashear (e 0))^T).
Proof.
have u0 : act_g Ashear (e 0) != 0 by rewrite -sqnorm_eq0 sqnorm_g0 pnatr_eq0.
rewrite /Hsing act_H_rank1 pinv_rank1 // sqnorm_g0.
by rewrite -natrX.
Qed.

Theorem T7_witness_singular : ~~ (Hsing \in unitmx).
Proof.
apply/negP => Hu; have : Hsing *m e 1 = 0.
  by rewrite /Hsing -mulmxA [_ *m e 1]mx11_scalar -/(dot (e 0) (e 1)) dot_e /= mul_mx_scalar scale0r.
by move/(congr1 (mulmx (invmx Hsing))); rewrite mulKmx // mulmx0; apply/eqP; apply: e_neq0.
Qed.

(* wᵀH⁺w changes from 1 to 1/4 for w = e₀, while wᵀHw is kept (T1) *)
Theorem T7_witness_quad :
  quad (pinv Hsing) (e 0) = 1 /\
  quad (pinv (act_H Ashear Hsing)) (act_w Ashear (e 0)) = 4^-1 /\
  quad (act_H Ashear Hsing) (act_w Ashear (e 0)) = quad Hsing (e 0).
Proof.
split; first by rewrite pinv_Hsing /Hsing quad_rank1 -/(sqnorm (e 0)) sqnorm_e expr1n.
split; last by rewrite quad_act // Ashear_unit.
rewrite pinv_act_Hsing quad_scale quad_rank1 Ashear_e0 Ashear_g0 dotBl !dot_e /=.
by rewrite subr0 expr1n mulr1.
Qed.

(* gᵀH⁺g changes from 0 to 1/4 for g = e₁ (for invertible H it never changes: T11) *)
Theorem T7_witness_newton :
  quad (pinv Hsing) (e 1) = 0 /\
  quad (pinv (act_H Ashear Hsing)) (act_g Ashear (e 1)) = 4^-1.
Proof.
split; first by rewrite pinv_Hsing /Hsing quad_rank1 dot_e /= expr0n.
rewrite pinv_act_Hsing quad_scale quad_rank1 Ashear_g1 Ashear_g0 dotBl !dot_e /=.
by rewrite sub0r sqrrN expr1n mulr1.
Qed.

(* pseudo-inversion does not commute with this congruence *)
Theorem T7_witness_congruence :
  pinv (act_H Ashear Hsing) != Ashear *m pinv Hsing *m Ashear^T.
Proof.
apply/negP => /eqP heq; have [_ [h _]] := T7_witness_quad.
have hr : Ashear *m pinv Hsing *m Ashear^T = Hsing.
  by rewrite pinv_Hsing /Hsing mulmxA -(mulmxA (Ashear *m e 0)) -trmx_mul -/(act_w Ashear (e 0)) Ashear_e0.
move: h; rewrite heq hr Ashear_e0 /Hsing quad_rank1 -/(sqnorm (e 0)) sqnorm_e expr1n => /eqP.
by rewrite eq_sym -(inj_eq invr_inj) invrK invr1 pnatr_eq1.
Qed.

(* D⁺(e₀, e₀, H) changes from 1 to 1/2, so the shear is not conformal (T7_Dplus_invariant) *)
Theorem T7_witness_Dplus :
  coupledDplus (e 0) (e 0) Hsing = 1 /\
  coupledDplus (act_w Ashear (e 0)) (act_g Ashear (e 0)) (act_H Ashear Hsing) = 2^-1.
Proof.
have [h1 [h4 _]] := T7_witness_quad.
split; first by rewrite /coupledDplus h1 !sqnorm_e divr1 mulr1.
rewrite /coupledDplus h4 sqnorm_g0 Ashear_e0 sqnorm_e divr1.
by field.
Qed.

Theorem T7_witness_not_conformal : Ashear \in unitmx /\ ~ conformal Ashear.
Proof.
split; first exact: Ashear_unit.
move=> cA; have := T7_Dplus_invariant (e 0) (e 0) Hsing cA.
have [-> ->] := T7_witness_Dplus; move/eqP; rewrite -(inj_eq invr_inj) invrK invr1.
by rewrite (eqr_nat R 2 1).
Qed.

End T7Witness.

(* Non-vacuity of the hypotheses of T7_converse / T7_iff: an invertible A other than the identity
   (2 I) under which D⁺ is invariant for every w, g, H. *)
Lemma T7_nonvacuous (R : rcfType) :
  exists A : 'M[R]_2, [/\ A \in unitmx, A != 1%:M &
    forall w g H, coupledDplus (act_w A w) (act_g A g) (act_H A H) = coupledDplus w g H].
Proof.
exists 2%:M; have [c2 u2] := conformal_2I R 2; split=> //; first exact: conformal_2I_neq1.
by move=> w g H; apply: T7_Dplus_invariant.
Qed.
