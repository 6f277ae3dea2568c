(* T7 for the pseudo-inverse that diagnose computes: the relative cutoff
     H⁺_τ = Σ_{|λ_i| > τ} λ_i⁻¹ u_i u_iᵀ,   τ = rtol · max_i |λ_i|,
   for a block Hessian given with an orthogonal eigendecomposition H = U diag(d) Uᵀ (UᵀU = I).
   MathComp 1.15 has no real spectral theorem, so the decomposition is a datum, as it is for
   LAPACK's eigh in the package; the statements below say what happens to that datum.
   Under the conformal map A = c·Q (QᵀQ = I, c > 0):
   - `T7_cut_decomposition`: A⁻ᵀ H A⁻¹ = (QU) diag(c⁻² d) (QU)ᵀ with (QU)ᵀ(QU) = I, an orthogonal
     eigendecomposition of the transformed Hessian, its eigenvalues scaled by c⁻²;
   - `cut_invZ`: the cutoff is relative, so it keeps the same eigenvalues after the scaling
     (|c⁻²λ_i| > rtol·max|c⁻²λ| iff |λ_i| > rtol·max|λ|);
   - `T7_cut_congruence`: (A⁻ᵀHA⁻¹)⁺_τ' = A H⁺_τ Aᵀ, the law T7 proves for Moore–Penrose;
   - `T7_cut_Dplus_invariant`: D⁺_τ = (wᵀH⁺_τw/wᵀw)·‖g‖² is unchanged, for every w, g, rtol.
   `T7_cut_rtol0`: at rtol = 0 the cutoff form is the Moore–Penrose inverse of T07_pseudo_inverse.
   `T7_cut_instance`: with d = (1, 1/100), rtol = 1/10, U = I, the rotation Q = [3/5 −4/5; 4/5 3/5]
   (any c > 0), every hypothesis holds, the cutoff removes the small eigenvalue (so H⁺_τ is not the
   Moore–Penrose inverse there), and D⁺_τ at w = g = e₀ is 1. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs Common T04_invariance_group T07_pseudo_inverse.

Section RelativeCutoff.
Variable R : rcfType.
Variable n : nat.
Implicit Types (U Q : 'M[R]_n) (d : 'rV[R]_n) (w g : 'cV[R]_n).

(* max_i |λ_i| *)
Definition maxabs d : R := \big[Num.max/0]_i `|d 0 i|.

(* λ_i⁻¹ where |λ_i| > rtol · max|λ|, else 0 *)
Definition cut_inv (rtol : R) d : 'rV[R]_n :=
  \row_i (if rtol * maxabs d < `|d 0 i| then (d 0 i)^-1 else 0).

(* H⁺_τ of H = U diag(d) Uᵀ *)
Definition pinv_cut rtol U d : 'M[R]_n := U *m diag_mx (cut_inv rtol d) *m U^T.

(* D⁺_τ = (wᵀH⁺_τw / wᵀw) · ‖g‖² *)
Definition coupledDplus_cut rtol U d w g : R := quad (pinv_cut rtol U d) w / sqnorm w * sqnorm g.

Lemma maxabsZ k d : 0 <= k -> maxabs (k *: d) = k * maxabs d.
Proof.
move=> k0; rewrite /maxabs (big_morph (fun x => k * x) (fun y z => maxr_pmulr y z k0) (mulr0 k)).
by apply: eq_bigr => i _; rewrite mxE normrM ger0_norm.
Qed.

Lemma cut_invZ rtol k d : 0 < k -> cut_inv rtol (k *: d) = k^-1 *: cut_inv rtol d.
Proof.
move=> k0; apply/rowP => i; rewrite !mxE maxabsZ ?(Order.POrderTheory.ltW k0) //.
rewrite normrM gtr0_norm // mulrCA ltr_pmul2l //.
by case: ifP => _; [rewrite invfM | rewrite mulr0].
Qed.

Lemma trZ a (M : 'M[R]_n) : (a *: M)^T = a *: M^T.
Proof. by rewrite linearZ. Qed.

Lemma diagZ a d : diag_mx (a *: d) = a *: diag_mx d.
Proof. by rewrite linearZ. Qed.

Lemma diag_mul (d e : 'rV[R]_n) : diag_mx d *m diag_mx e = diag_mx (\row_i (d 0 i * e 0 i)).
Proof. by apply/matrixP => i j; rewrite mul_diag_mx !mxE mulrnAr. Qed.

Lemma orth_conformal Q c : Q^T *m Q = 1%:M -> 0 < c ->
  (c *: Q)^T *m (c *: Q) = (c ^+ 2)%:M.
Proof.
move=> hQ c0.
by rewrite trZ sAl sAr hQ scalerA -expr2 scalemx1.
Qed.

Theorem T7_cut_decomposition U d Q c : U^T *m U = 1%:M -> Q^T *m Q = 1%:M -> 0 < c ->
  (Q *m U)^T *m (Q *m U) = 1%:M /\
  act_H (c *: Q) (U *m diag_mx d *m U^T) = (Q *m U) *m diag_mx (c ^- 2 *: d) *m (Q *m U)^T.
Proof.
move=> hU hQ c0; have c0' := lt0r_neq0 c0.
split; first by rewrite trmx_mul -mulmxA (mulmxA Q^T) hQ mul1mx.
have hA := orth_conformal hQ c0.
have cA : conformal (c *: Q) by exists c.
rewrite /act_H (conformal_inv (conformal_unit cA) c0' hA).
rewrite !trZ !trmxK diagZ !trmx_mul.
rewrite ?(sAl, sAr, scalerA, mulmxA); congr (_ *: _); field; exact: c0'.
Qed.

Theorem T7_cut_congruence rtol U d Q c : 0 < c ->
  pinv_cut rtol (Q *m U) (c ^- 2 *: d) = (c *: Q) *m pinv_cut rtol U d *m (c *: Q)^T.
Proof.
move=> c0; have c0' := lt0r_neq0 c0.
rewrite /pinv_cut cut_invZ ?invr_gt0 ?exprn_gt0 // invrK diagZ !trZ !trmx_mul.
rewrite ?(sAl, sAr, scalerA, mulmxA); congr (_ *: _); field.
Qed.

Theorem T7_cut_Dplus_invariant rtol U d Q c w g : Q^T *m Q = 1%:M -> 0 < c ->
  coupledDplus_cut rtol (Q *m U) (c ^- 2 *: d) (act_w (c *: Q) w) (act_g (c *: Q) g)
  = coupledDplus_cut rtol U d w g.
Proof.
move=> hQ c0; have c0' := lt0r_neq0 c0.
have hA := orth_conformal hQ c0.
have Au : c *: Q \in unitmx by apply: conformal_unit; exists c.
rewrite /coupledDplus_cut T7_cut_congruence // (quad_conf _ _ hA) (sqnorm_conf_w w hA).
rewrite (sqnorm_conf_g g Au c0' hA) invfM.
set q := quad _ w; set t := (sqnorm w)^-1; field; exact: c0'.
Qed.

(* at rtol = 0 the cutoff keeps every nonzero eigenvalue: H⁺_0 is the Moore–Penrose inverse *)
Theorem T7_cut_rtol0 U d : U^T *m U = 1%:M ->
  pinv_cut 0 U d = pinv (U *m diag_mx d *m U^T).
Proof.
move=> hU; symmetry; apply: pinv_eq.
have cut0 i : (cut_inv 0 d) 0 i = if d 0 i != 0 then (d 0 i)^-1 else 0.
  by rewrite mxE mul0r normr_gt0.
have hd : diag_mx d *m diag_mx (cut_inv 0 d) *m diag_mx d = diag_mx d.
  rewrite !diag_mul; congr diag_mx; apply/rowP => i; rewrite !mxE ?cut0 ?mul0r ?normr_gt0.
  by have [-> | dn] := eqVneq (d 0 i) 0; [rewrite !mul0r | rewrite /= mulfV // mul1r].
have hc : diag_mx (cut_inv 0 d) *m diag_mx d *m diag_mx (cut_inv 0 d) = diag_mx (cut_inv 0 d).
  rewrite !diag_mul; congr diag_mx; apply/rowP => i; rewrite !mxE ?cut0 ?mul0r ?normr_gt0.
  by have [-> | dn] := eqVneq (d 0 i) 0; [rewrite /= !mul0r | rewrite /= mulVf // mul1r].
have hs : diag_mx d *m diag_mx (cut_inv 0 d) = diag_mx (cut_inv 0 d) *m diag_mx d.
  exact: diag_mx_comm.
have tr (M : 'M[R]_n) : M^T = M -> (U *m M *m U^T)^T = U *m M *m U^T.
  by move=> hM; rewrite !trmx_mul trmxK hM mulmxA.
have diagT (r : 'rV[R]_n) : (diag_mx r)^T = diag_mx r by rewrite tr_diag_mx.
have prod (M N : 'M[R]_n) : U *m M *m U^T *m (U *m N *m U^T) = U *m (M *m N) *m U^T.
  by rewrite -!mulmxA (mulmxA U^T) hU mul1mx !mulmxA.
rewrite /pinv_cut; split.
- by rewrite !prod hd.
- by rewrite !prod hc.
- by rewrite prod tr // trmx_mul !diagT hs.
- by rewrite prod tr // trmx_mul !diagT hs.
Qed.

End RelativeCutoff.

Section Instance.
Variable R : rcfType.

Definition inst_d : 'rV[R]_2 := \row_(i < 2) (if (i : nat) == 0%N then 1 else 100%:R^-1).
Definition inst_Q : 'M[R]_2 := \matrix_(i < 2, j < 2)
  (if (i : nat) == 0%N then (if (j : nat) == 0%N then 3%:R / 5%:R else - (4%:R / 5%:R))
   else (if (j : nat) == 0%N then 4%:R / 5%:R else 3%:R / 5%:R)).
Definition inst_e0 : 'cV[R]_2 := \col_(i < 2) (if (i : nat) == 0%N then 1 else 0).
Definition inst_rtol : R := 10%:R^-1.

Lemma inst_Q_orth : inst_Q^T *m inst_Q = 1%:M.
Proof.
have f5 : 5%:R != 0 :> R by rewrite pnatr_eq0.
apply/matrixP => i j; rewrite !mxE !big_ord_recl big_ord0 !mxE /=.
by case: i => [[|[|i]] hi] //; case: j => [[|[|j]] hj] //=; field.
Qed.

Lemma inst_maxabs : maxabs inst_d = 1.
Proof.
rewrite /maxabs !big_ord_recl big_ord0 !mxE /= normr1 ger0_norm ?invr_ge0 ?ler0n //.
have h0 : (0 : R) <= 100%:R^-1 by rewrite invr_ge0 ler0n.
have h1 : (100%:R : R)^-1 <= 1 by rewrite Order.POrderTheory.ltW // invf_lt1 ?ltr0n ?ltr1n.
by rewrite (Order.POrderTheory.max_l h0) (Order.POrderTheory.max_l h1).
Qed.

Lemma inst_cut : cut_inv inst_rtol inst_d = \row_(i < 2) (if (i : nat) == 0%N then 1 else 0).
Proof.
apply/rowP => i; rewrite !mxE inst_maxabs mulr1 /inst_rtol.
case: i => [[|[|i]] hi] //=.
- by rewrite normr1 invf_lt1 ?ltr0n ?ltr1n // invr1.
- by rewrite ger0_norm ?invr_ge0 ?ler0n // ltf_pinv ?posrE ?ltr0n // ltr_nat.
Qed.

Lemma inst_not_pinv : pinv_cut inst_rtol 1%:M inst_d <> pinv (1%:M *m diag_mx inst_d *m (1%:M)^T).
Proof.
rewrite -T7_cut_rtol0 ?trmx1 ?mulmx1 // /pinv_cut inst_cut !trmx1 !mulmx1 !mul1mx.
move/matrixP/(_ (lift ord0 ord0) (lift ord0 ord0)); rewrite !mxE /= mul0r normr_gt0 invr_eq0.
by rewrite pnatr_eq0 /= invrK !mulr1n => /eqP; rewrite eq_sym pnatr_eq0.
Qed.

Lemma inst_Dplus : coupledDplus_cut inst_rtol 1%:M inst_d inst_e0 inst_e0 = 1.
Proof.
rewrite /coupledDplus_cut /quad /sqnorm /dot /pinv_cut inst_cut trmx1 mul1mx mulmx1.
rewrite !mxE !big_ord_recl !big_ord0 !mxE /=.
rewrite !(mul0r, mulr0, mul1r, mulr1, addr0, mulr1n, mulr0n, divr1).
by rewrite !big_ord_recl big_ord0 !mxE /= !(mul0r, mulr0, mul1r, mulr1, addr0, mulr1n, mulr0n).
Qed.

(* the hypotheses of T7_cut_decomposition and T7_cut_Dplus_invariant met with real content: an orthogonal
   U = I, a rotation Q (any c > 0 completes them), an eigenvalue that the cutoff removes, so that H⁺_τ is
   not the Moore–Penrose inverse, and a nonzero D⁺_τ *)
Theorem T7_cut_instance :
  [/\ inst_Q^T *m inst_Q = 1%:M, (1%:M : 'M[R]_2)^T *m 1%:M = 1%:M,
      cut_inv inst_rtol inst_d 0 1 = 0,
      pinv_cut inst_rtol 1%:M inst_d <> pinv (1%:M *m diag_mx inst_d *m (1%:M)^T)
    & coupledDplus_cut inst_rtol 1%:M inst_d inst_e0 inst_e0 = 1].
Proof.
split; [exact: inst_Q_orth | by rewrite trmx1 mulmx1 | by rewrite inst_cut mxE |
        exact: inst_not_pinv | exact: inst_Dplus].
Qed.

End Instance.
