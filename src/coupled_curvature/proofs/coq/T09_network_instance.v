(* The pinned instances of T09_network_loss.v: the theorems' hypotheses hold on concrete networks
   with two hidden layers around the block, and their conclusions are nontrivial equations.
   - T9_net_instance_sq (σ(z) = z², k = 2): input 1, a hidden layer before the block (z ↦ z²),
     the block W_l ∈ R^{2×1} (w = (1, 1)), a hidden layer after it (weights (1, 1)), output
     weight 1, every bias 0, one sample, ℓ(f) = (f − 1)².  Then F(v) = (v₀² + v₁²)², p = 2² = 4,
     f = 4, P = 24, Q = 32, and wᵀg = 4·24 = 96, wᵀHw = 4·3·24 + 16·32 = 800 (and the radial
     derivatives of L(tw) at t = 1 are 96 and 800).
   - T9_net_instance_k1 (σ(z) = z, k = 1): input 1, a hidden layer before the block with weights
     (1, 2), the block W_l ∈ R^{1×2} (w = (1, 1)), a hidden layer after it, every weight 1, every
     bias 0, one sample, ℓ(f) = (f − 1)².  Then F(v) = v₀ + 2v₁, f = 3, P = 12, Q = 18,
     wᵀg = 12, wᵀHw = 18, g = (4, 8), ‖g‖² = 80, and D = 18/(2·80) = 9/80 < Q/P² = 1/8:
     the bound D ≤ Q/P² holds with cos²∠(w, g) = 9/10. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import boolp classical_sets functions reals topology normedtype derive.
From mathcomp Require Import ring.
From CoupledCurvature Require Import DefsAnalytic Common T01_analytic T02_homogeneous_rescaling.
From CoupledCurvature Require Import T09_network_homogeneity T09_closed_forms_grad T09_network_loss.

(* functions with every partial derivative differentiable, everywhere: closed under +, −, ×, Σ *)
Section Smooth.
Variable R : realType.
Variable n : nat.
Local Notation U := (matrix_normedModType R n 0).

Definition c2 (g : U -> R^o) :=
  (forall y, differentiable g y) /\ (forall a y, differentiable (fun z : U => (d1 g (e a) z : R^o)) y).

Lemma c2_cst (c : R) : c2 (cst (c : R^o)).
Proof. by split=> [y|a y]; [|rewrite cst_d1]; exact: differentiable_cst. Qed.

Lemma c2_crd k : c2 (crd k).
Proof. by split=> [y|a y]; [exact: crd_diff | rewrite crd_d1; exact: differentiable_cst]. Qed.

Lemma c2D f g : c2 f -> c2 g -> c2 (f + g).
Proof.
move=> [df ddf] [dg ddg]; split=> [y|a y]; first exact: differentiableD.
have -> : (fun z : U => (d1 (f + g) (e a) z : R^o))
          = (fun z : U => (d1 f (e a) z : R^o)) + (fun z : U => (d1 g (e a) z : R^o)).
  by apply/funext => z; rewrite /d1 deriveD //; exact/diff_derivable.
exact: differentiableD.
Qed.

Lemma c2N f : c2 f -> c2 (- f).
Proof.
move=> [df ddf]; split=> [y|a y]; first exact: differentiableN.
have -> : (fun z : U => (d1 (- f) (e a) z : R^o)) = - (fun z : U => (d1 f (e a) z : R^o)).
  by apply/funext => z; rewrite /d1 deriveN //; exact/diff_derivable.
exact: differentiableN.
Qed.

Lemma c2M f g : c2 f -> c2 g -> c2 (f * g).
Proof.
move=> [df ddf] [dg ddg]; split=> [y|a y]; first exact: differentiableM.
have -> : (fun z : U => (d1 (f * g) (e a) z : R^o))
          = f * (fun z : U => (d1 g (e a) z : R^o)) + g * (fun z : U => (d1 f (e a) z : R^o)).
  by apply/funext => z; rewrite /d1 deriveM //; exact/diff_derivable.
by apply: differentiableD; apply: differentiableM.
Qed.

Lemma c2_sum m (F : 'I_m -> U -> R^o) : (forall r, c2 (F r)) -> c2 (\sum_(r < m) F r).
Proof.
elim: m F => [F _|m IH F cF]; first by rewrite big_ord0; exact: c2_cst.
by rewrite big_ord_recr; apply: c2D; [apply: IH => r|]; exact: cF.
Qed.

Lemma c2_near g x : c2 g ->
  differentiable_near g x /\ (forall a, differentiable (fun z : U => (d1 g (e a) z : R^o)) x).
Proof.
case=> dg ddg; split=> //; rewrite /differentiable_near; near=> y; exact: dg.
Unshelve. all: by end_near.
Qed.
End Smooth.

(* ---- σ(z) = z², p = 4 ---- *)
Section SqInstance.
Variable R : realType.
Local Notation V2 := (matrix_normedModType R 1 0).
Local Notation W1 := (matrix_normedModType R 0 0).

Definition sqC : ctx R 1 1 := Pre 1%:M 0 (@Hole R 1).
Definition sqN : net R 2 1 := Layer (const_mx 1) 0 (Out 1%:M 0).

Lemma sq_eval (v : V2) (x : 'cV[R]_1) :
  eval (@sq R) (plug sqC (Layer (@unflat R 1 0 v) 0 sqN)) x 0 0
  = (\sum_(r < 2) (v (@mxvec_index 2 1 r 0) 0 * x 0 0 ^+ 2) ^+ 2) ^+ 2.
Proof.
rewrite /= !addr0 !mul1mx !mxE /sq; congr (_ ^+ 2); apply: eq_bigr => r _.
by rewrite !mxE big_ord1 !mxE mul1r.
Qed.

(* the loss as a polynomial: ((Σ_r v_r²)² − 1)² *)
Definition uA : V2 -> R^o := \sum_(r < 2) (crd (@mxvec_index 2 1 r 0) * crd (@mxvec_index 2 1 r 0)).
Definition gA : V2 -> R^o := uA * uA - cst 1.

Lemma uAE (v : V2) : uA v = \sum_(r < 2) (v (@mxvec_index 2 1 r 0) 0 * 1 ^+ 2) ^+ 2.
Proof. by rewrite /uA fct_sumE; apply: eq_bigr => r _; rewrite expr1n mulr1 expr2. Qed.

Lemma c2_gA : c2 (gA * gA).
Proof.
have cu : c2 uA by apply: c2_sum => r; apply: c2M; exact: c2_crd.
by rewrite /gA; apply: c2M; apply: c2D; try apply: c2N; try apply: c2M; try exact: c2_cst.
Qed.

Theorem T9_net_instance_sq :
  let x : 'I_1 -> 'cV[R]_1 := fun _ => 1%:M in
  let ell : 'I_1 -> W1 -> R^o := fun _ f => (f 0 0 - 1) ^+ 2 in
  let w : V2 := const_mx 1 in
  let f := fun s => (eval (@sq R) (plug sqC (Layer (@unflat R 1 0 w) 0 sqN)) (x s) : W1) in
  let L := fun v : V2 => \sum_(s < 1) ell s (eval (@sq R) (plug sqC (Layer (@unflat R 1 0 v) 0 sqN)) (x s)) in
  [/\ [/\ forall c z : R, 0 < c -> sq (c * z) = c ^+ 2 * sq z, unbiased sqN
        & (2 ^ (depth sqN).+1 = 4)%N],
      (forall s, differentiable_near (ell s) (f s)) /\
      (forall s a, differentiable (fun y : W1 => (d1 (ell s) (e a) y : R^o)) (f s)),
      differentiable_near L w /\ (forall a, differentiable (fun y : V2 => (d1 L (e a) y : R^o)) w),
      \sum_(s < 1) dot (grad (ell s) (f s)) (f s) = 24%:R /\
      \sum_(s < 1) quad (hess (ell s) (f s)) (f s) = 32%:R
    & (d1 L w w = 96%:R /\ d2 L w w w = 800%:R) /\
      (dot w (grad L w) = 96%:R /\ quad (hess L w) w = 800%:R)].
Proof.
move=> x ell w f L.
have Eell s : ell s = lh 1 * lh 1 by exact: sqloss_E.
have EL : L = gA * gA.
  apply/funext => v; rewrite /L big_ord1 /ell sq_eval /x /gA.
  have -> : ((gA * gA) v : R) = (uA v * uA v - 1) * (uA v * uA v - 1) by [].
  by rewrite uAE mxE eqxx mulr1n !expr2.
have hs : forall c z : R, 0 < c -> sq (c * z) = c ^+ 2 * sq z by move=> c z _; rewrite /sq exprMn.
have uN : unbiased sqN by [].
have hl : (forall s, differentiable_near (ell s) (f s)) /\
          (forall s a, differentiable (fun y : W1 => (d1 (ell s) (e a) y : R^o)) (f s)).
  by split=> s; rewrite Eell; have [] := sqloss_hyps 1 (f s).
have hL : differentiable_near L w /\ (forall a, differentiable (fun y : V2 => (d1 L (e a) y : R^o)) w).
  by rewrite EL; exact: c2_near c2_gA.
have fw : f 0 0 0 = 4%:R.
  rewrite /f sq_eval /x /w; under eq_bigr => r _ do rewrite !mxE expr1n !mulr1 expr1n.
  by rewrite big_ord_recr big_ord1 /=; ring.
have HP : \sum_(s < 1) dot (grad (ell s) (f s)) (f s) = 24%:R.
  by rewrite big_ord1 Eell sqloss_P fw; ring.
have HQ : \sum_(s < 1) quad (hess (ell s) (f s)) (f s) = 32%:R.
  by rewrite big_ord1 Eell sqloss_Q fw; ring.
have [R1 R2] := @T9_net_ray_closed_forms R 1 1 0 0 1 (@sq R) 2 sqC sqN x ell w hs uN hl.1 hl.2.
have [G1 G2] := @T9_net_closed_forms R 1 1 0 0 1 (@sq R) 2 sqC sqN x ell w hs uN hl.1 hl.2 hL.1 hL.2.
have p4 : (2 ^ (depth sqN).+1 = 4)%N by [].
rewrite HP HQ p4 in R1 R2 G1 G2.
by split => //; split; split; [rewrite R1 | rewrite R2 | rewrite G1 | rewrite G2]; ring.
Qed.
End SqInstance.

(* ---- σ(z) = z, k = 1: the bound D ≤ Q/P² ---- *)
Section K1Instance.
Variable R : realType.
Local Notation V2 := (matrix_normedModType R 1 0).
Local Notation W1 := (matrix_normedModType R 0 0).

Definition lin (z : R) : R := z.
Definition linC : ctx R 1 2 := Pre (\col_r (r.+1)%:R) 0 (@Hole R 2).
Definition linN : net R 1 1 := Layer 1%:M 0 (Out 1%:M 0).
Local Notation m b := (@mxvec_index 1 2 0 b).

Lemma lin_eval (v : V2) (x : 'cV[R]_1) :
  eval lin (plug linC (Layer (@unflat R 0 1 v) 0 linN)) x 0 0
  = \sum_(b < 2) v (m b) 0 * ((b.+1)%:R * x 0 0).
Proof.
rewrite /= !addr0 !mul1mx !mxE /lin; apply: eq_bigr => b _.
by rewrite unflatE !mxE big_ord1; congr (_ * (_ * _)); rewrite mxE.
Qed.

(* the residual F(v) − 1 = v₀ + 2v₁ − 1 and its partials, the constants c_a *)
Definition gB : V2 -> R^o := \sum_(b < 2) ((b.+1)%:R \*: crd (m b)) - cst 1.
Definition cB (a : 'I_2) : R := \sum_(b < 2) (b.+1)%:R * (m b == a)%:R.

Lemma gBE (v : V2) : gB v = \sum_(b < 2) (b.+1)%:R * v (m b) 0 - 1.
Proof.
have -> : gB v = (\sum_(b < 2) ((b.+1)%:R \*: crd (m b))) v - 1 by [].
by rewrite fct_sumE.
Qed.

Lemma gB_d1 a : (fun y : V2 => (d1 gB (e a) y : R^o)) = cst (cB a).
Proof.
apply/funext => y; rewrite /d1 /gB deriveB; try by apply/diff_derivable; diff_tac;
  apply: differentiable_sum => b; diff_tac.
rewrite derive_val subr0 derive_sum => [|b]; last by apply/diff_derivable; diff_tac.
apply: eq_bigr => b _; rewrite deriveZ; last by apply/diff_derivable; diff_tac.
by rewrite /crd derive_coord.
Qed.

Lemma c2_gB1 : c2 gB.
Proof.
split=> [y|a y]; rewrite ?gB_d1; try exact: differentiable_cst.
by rewrite /gB; diff_tac; apply: differentiable_sum => b; diff_tac.
Qed.

Lemma c2_gB : c2 (gB * gB).
Proof. exact: c2M c2_gB1 c2_gB1. Qed.

Lemma m_inj : injective (fun b : 'I_2 => (m b : 'I_2)).
Proof. by move=> b b' /cast_ord_inj /enum_rank_inj [->]. Qed.

Lemma cB_m b : cB (m b) = (b.+1)%:R.
Proof.
rewrite /cB (bigD1 b) //= eqxx mulr1 big1 ?addr0 // => b' /negbTE nb.
by rewrite (inj_eq m_inj) nb mulr0.
Qed.

Theorem T9_net_instance_k1 :
  let x : 'I_1 -> 'cV[R]_1 := fun _ => 1%:M in
  let ell : 'I_1 -> W1 -> R^o := fun _ f => (f 0 0 - 1) ^+ 2 in
  let w : V2 := const_mx 1 in
  let f := fun s => (eval lin (plug linC (Layer (@unflat R 0 1 w) 0 linN)) (x s) : W1) in
  let L := fun v : V2 => \sum_(s < 1) ell s (eval lin (plug linC (Layer (@unflat R 0 1 v) 0 linN)) (x s)) in
  let P := \sum_(s < 1) dot (grad (ell s) (f s)) (f s) in
  let Q := \sum_(s < 1) quad (hess (ell s) (f s)) (f s) in
  [/\ (forall c z : R, 0 < c -> lin (c * z) = c ^+ 1 * lin z) /\ unbiased linN,
      (forall s, differentiable_near (ell s) (f s)) /\
      (forall s a, differentiable (fun y : W1 => (d1 (ell s) (e a) y : R^o)) (f s)),
      differentiable_near L w /\ (forall a, differentiable (fun y : V2 => (d1 L (e a) y : R^o)) w),
      [/\ P = 12%:R, Q = 18%:R, P != 0 & 0 <= Q]
    & [/\ sqnorm (grad L w) = 80%:R, coupledD w (grad L w) (hess L w) = 9%:R / 80%:R,
          Q / P ^+ 2 = 1 / 8%:R & coupledD w (grad L w) (hess L w) <= Q / P ^+ 2]].
Proof.
move=> x ell w f L P Q.
have Eell s : ell s = lh 1 * lh 1 by exact: sqloss_E.
have EL : L = gB * gB.
  apply/funext => v; rewrite /L big_ord1 /ell lin_eval /x.
  have -> : ((gB * gB) v : R) = gB v * gB v by [].
  rewrite expr2 gBE; congr ((_ - _) * (_ - _)); apply: eq_bigr => b _;
    by rewrite mxE eqxx mulr1n mulr1 mulrC.
have hs : forall c z : R, 0 < c -> lin (c * z) = c ^+ 1 * lin z by move=> c z _; rewrite expr1.
have uN : unbiased linN by [].
have hl : (forall s, differentiable_near (ell s) (f s)) /\
          (forall s a, differentiable (fun y : W1 => (d1 (ell s) (e a) y : R^o)) (f s)).
  by split=> s; rewrite Eell; have [] := sqloss_hyps 1 (f s).
have hL : differentiable_near L w /\ (forall a, differentiable (fun y : V2 => (d1 L (e a) y : R^o)) w).
  by rewrite EL; exact: c2_near c2_gB.
have fw : f 0 0 0 = 3%:R.
  rewrite /f lin_eval /x /w; under eq_bigr => b _ do rewrite !mxE eqxx mulr1n !mulr1 mul1r.
  by rewrite big_ord_recr big_ord1 /=; ring.
have HP : P = 12%:R by rewrite /P big_ord1 Eell sqloss_P fw; ring.
have HQ : Q = 18%:R by rewrite /Q big_ord1 Eell sqloss_Q fw; ring.
have P0 : P != 0 by rewrite HP pnatr_eq0.
have Q0 : 0 <= Q by rewrite HQ ler0n.
have [G1 G2 G3 G4] : [/\ dot w (grad L w) = P, quad (hess L w) w = Q,
    coupledD w (grad L w) (hess L w)
    = Q / P ^+ 2 * (dot w (grad L w) ^+ 2 / (sqnorm w * sqnorm (grad L w)))
  & coupledD w (grad L w) (hess L w) <= Q / P ^+ 2] := @T9_net_k1_bound R 1 0 1 0 1 lin linC linN x ell w hs uN hl.1 hl.2 hL.1 hL.2 P0 Q0.
have gw : gB w = 2%:R.
  rewrite gBE; under eq_bigr => b _ do rewrite mxE.
  by rewrite big_ord_recr big_ord1 /=; ring.
have Eg : grad L w = \col_a (4%:R * cB a).
  apply/matrixP => a b; rewrite !mxE EL.
  have := congr1 (fun h => h w) (sq_d1 (e a) c2_gB1.1); rewrite /= => ->.
  have := congr1 (fun h => h w) (gB_d1 a); rewrite /= => dg.
  transitivity (gB w * d1 gB (e a) w + gB w * d1 gB (e a) w); first by [].
  by rewrite dg gw /cst; ring.
have sqg : sqnorm (grad L w) = 80%:R.
  rewrite Eg /sqnorm dotE; under eq_bigr => a _ do rewrite mxE.
  rewrite (reindex_inj m_inj) /=; under eq_bigr => b _ do rewrite cB_m.
  by rewrite big_ord_recr big_ord1 /=; ring.
have sqw : sqnorm w = 2%:R.
  by rewrite /sqnorm dotE big_ord_recr big_ord1 /= !mxE; ring.
split => //; split => //.
  by rewrite /coupledD /RQ G2 sqg sqw HQ; field.
by rewrite HQ HP; field.
Qed.
End K1Instance.
